#!/bin/bash
# JAX's persistent compilation cache carried from one device session to the next: a fresh
# machine otherwise compiles everything again (the 32GiB key-resident first proof: 454 s
# of compiles, bench/NOTES.md session 12).
#
#   bash bench/device/cache.sh unpack   # $CACHE_IN (.jc)/jc.tgz.* (a call's `carry: [".jc"]`) -> $JAXPROVE_CACHE
#   bash bench/device/cache.sh pack     # $JAXPROVE_CACHE -> $OUT/jc.tgz.00, .01, ... (15 MB parts)
#
# pack keeps the newest entries up to $CACHE_MB (default 44) MB, so the parts stay within
# what a call may bring back (8 files of 16 MiB) and carry (64 MiB with the repository);
# here, copy the parts into .jc/ (ignored: .git/info/exclude) in place of the old ones.
# Entries are keyed by the lowered program, jax version and device, so a changed program
# misses and the rest still hit.
set -eu
C=${JAXPROVE_CACHE:-/tmp/jc}
case "${1:-}" in
unpack)
    mkdir -p "$C"
    IN=${CACHE_IN:-.jc}
    if ls "$IN"/jc.tgz.* >/dev/null 2>&1; then
        cat "$IN"/jc.tgz.* | tar xzf - -C "$C" --strip-components=1
        echo "cache: $(ls "$C" | wc -l) entries in $C"
    else
        echo "cache: nothing carried ($IN/jc.tgz.*)"
    fi ;;
pack)
    : "${OUT:?pack writes to \$OUT}"
    limit=$(( ${CACHE_MB:-44} * 1000000 )) total=0
    list=$(mktemp)
    ls -t "$C" | while read -r f; do
        s=$(stat -c %s "$C/$f"); total=$((total + s))
        [ $total -gt $limit ] && break
        echo "$f"
    done > "$list"
    tar czf - -C "$C" -T "$list" --transform 's,^,jc/,' | split -b 15M -d - "$OUT/jc.tgz."
    echo "cache: $(wc -l < "$list") of $(ls "$C" | wc -l) entries packed: $(ls "$OUT"/jc.tgz.*)"
    rm -f "$list" ;;
*)
    echo "usage: $0 pack|unpack" >&2; exit 2 ;;
esac

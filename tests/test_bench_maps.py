"""bench.maps: the mappings an MSM compile adds, and what clear_caches frees."""
import json
import os

import pytest

from bench import maps


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_an_msm_compile_adds_mappings_that_clear_caches_frees(capsys):
    assert maps.main(["--windows", "3", "--points", "4"]) == 0
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    added = rec["mappings_after_each"]
    assert rec["case"] == "maps.msm" and len(added) == 1 and added[0] > 100
    assert rec["freed_by_clear_caches"] > added[0] // 2
    assert rec["anonymous_by_permission"].get("r-xp", 0) > 0

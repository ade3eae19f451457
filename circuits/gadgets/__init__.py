"""Gadgets of the tensor circuit language: boolean, uint32 (+ MultiEq), sha256, num, multipack."""

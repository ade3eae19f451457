"""The tensor circuit language (record / witness interpretations of one
circuit source) and the gadgets and Filecoin circuits written in it.
Imports point down only: circuits -> ops."""

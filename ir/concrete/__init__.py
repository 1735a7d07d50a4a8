"""Concrete index notation (stage 2): one variable per storage level. Its expressions
and statements, how operators act on fill values (algebra) and the iteration lattices
derived from that, affine subscripts as derived indices, and the front end from index
notation (from_notation).

Layering: imports only itself, ir/notation/, ir/'s shared top and formats/."""

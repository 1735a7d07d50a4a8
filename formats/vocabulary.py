"""The vocabulary of level-format files: the functions and properties a level declares,
the names each function's body sees, the values it returns, and the error every check
raises (file and line first, like a compiler)."""

from __future__ import annotations

# ----------------------------------------------------------------------------- vocabulary

ITERATION = ("coord_bounds", "coord_access", "pos_bounds", "pos_access", "locate")
# The positions of a parent's coordinates within [i_lo, i_hi) (paper 000's subsections):
# an ordered level walks a window of a row, or finds one coordinate, without a scan.
SUBSECTION = ("subsection",)
INSERT = ("size", "insert_init", "insert_coord", "insert_finalize")
# Integer constants in bodies and array fills must fit every index type a tensor may
# use: 2**40 as a fill became 0 in int32 arrays, and 10**23 overflowed the interpreter.
INDEX_CONSTANT_LIMIT = 2**31 - 1
APPEND = ("append_init", "append_coord", "append_edges", "append_finalize")

FUNCTION_NAMES: tuple[str, ...] = ITERATION + SUBSECTION + INSERT + APPEND
PROPERTY_NAMES: tuple[str, ...] = ("full", "ordered", "unique", "branchless", "compact")

BOUNDS_ENV = ("p_parent", "i_parent", "i_grandparent")
ACCESS_ENV = ("p_parent", "i", "i_parent", "i_grandparent")
PHASE_ENV = ("parent_size", "size")
OWN_ENV: dict[str, tuple[str, ...]] = {
    "coord_bounds": BOUNDS_ENV,
    "pos_bounds": BOUNDS_ENV,
    "coord_access": ACCESS_ENV,
    "locate": ACCESS_ENV,
    "subsection": ("p_parent", "i_lo", "i_hi", "i_parent", "i_grandparent"),
    "pos_access": ("p", "p_parent", "i_parent", "i_grandparent"),
    "size": ("parent_size",),
    "insert_init": PHASE_ENV,
    "insert_finalize": PHASE_ENV,
    "append_init": PHASE_ENV,
    "append_finalize": PHASE_ENV,
    "insert_coord": ("p", "i", "p_parent"),
    "append_coord": ("p", "i", "p_parent"),
    "append_edges": ("p_parent", "p_begin", "p_end"),
}
# Names the compiler binds when it inlines a body: per function, plus the extents everywhere.
ENVIRONMENTS: dict[str, tuple[str, ...]] = {
    fn: (*names, "N", "N_child") for fn, names in OWN_ENV.items()
}
# Number of values each function returns (0: it must not return).
RETURN_ARITY: dict[str, int] = {fn: 0 for fn in FUNCTION_NAMES} | {
    **{fn: 2 for fn in ITERATION + SUBSECTION},
    "size": 1,
}
# Functions that may instead return one value on every path: insert_coord's says whether
# the coordinate went in (False: its parent's segment is full, and the call fails).
OPTIONAL_RETURN = frozenset({"insert_coord"})

STORE_FUNCTIONS = frozenset(INSERT[1:] + APPEND)  # assembly code may write arrays, size not
LENGTH_NAMES = ("parent_size", "size", "N")
PACKED_NAMES = ("N", "max_children")  # what a parameter's packed value may read
CALLABLE_ARITY = {"min": (2, None), "max": (2, None), "abs": (1, 1)}
ALL_ENV_NAMES = frozenset(n for names in ENVIRONMENTS.values() for n in names)
RESERVED = ALL_ENV_NAMES | set(CALLABLE_ARITY) | {"range"}

TOP_KEYS = ("name", "doc", "params", "arrays", "properties", "capabilities")
ARRAY_KINDS = ("pos", "crd")
ITERATE_KINDS = ("coordinate", "position")

TAG = "tag:yaml.org,2002:"
YAML_KINDS = {"str": "a string", "int": "an integer", "bool": "a boolean", "null": "null",
               "float": "a float", "map": "a mapping", "seq": "a list"}


# ----------------------------------------------------------------------------- public types

class FormatFileError(ValueError):
    """A level-format file is invalid; str() is '<path>:<line>: <problem>' like a compiler."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        """Keep the three attributes across pickling (e.g. to worker processes)."""
        return (type(self), (self.path, self.line, self.problem))

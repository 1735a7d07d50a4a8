"""Index notation (pipeline stage 1 of ir/): the AST every front end produces and its
text form (syntax), operators described by their algebraic properties, subscripts, result
dtypes, and the passes over index notation (aliases, diagonals).

Layering: imports only itself and ir/'s shared top (errors, types) and formats/."""

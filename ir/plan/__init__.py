"""Choosing how a kernel compiles (stage 6, after opt): the planning loop that tries a
statement as one nest, split, or with converted operands and keeps the first program
legality accepts (lowering), the cost model and the autoscheduler.

Layering: the last stage of ir/: imports any stage (notation, concrete, schedule, loops, opt),
ir/'s shared top and formats/; nothing in ir/ imports it."""

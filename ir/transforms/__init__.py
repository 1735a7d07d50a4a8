"""Passes over index notation and concrete notation that run before the loop IR: each
rewrites a statement or says, by what it returns, that it cannot apply."""

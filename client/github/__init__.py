"""The GitHub shell tool: one gh/git command, one repository, one short lease."""

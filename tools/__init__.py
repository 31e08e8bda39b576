"""Tools on top of edge, core and shared: the ``edgecore`` CLI, the dev stack
(``edgecore up``) and model preparation. Nothing in edge/, core/ or shared/ imports it."""

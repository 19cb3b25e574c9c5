"""The study and workbench notebooks, shipped with the package so that installed copies can run them."""

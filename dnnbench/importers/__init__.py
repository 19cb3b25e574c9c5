"""dnnbench.importers"""

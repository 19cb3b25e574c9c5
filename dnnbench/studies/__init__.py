"""dnnbench.studies"""

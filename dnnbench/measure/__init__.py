"""dnnbench.measure"""

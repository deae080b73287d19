"""Structured gradients: operations whose backward is not autograd through their forward."""

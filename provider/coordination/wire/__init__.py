"""Typed records and their bytes: one frozen record per payload kind and per stored result, the
envelope that checks them on read, and the pipeline configuration. Built on ``base`` only.
"""

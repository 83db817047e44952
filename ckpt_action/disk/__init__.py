"""disk"""

"""The local Hub's Xet side: the CAS service ``hf_xet`` uploads to and downloads from.

Rooms: ``hashes`` (the protocol's keyed hashes and their string form), ``xorb`` and
``shard`` (the two object formats), ``store`` (where they live on disk), ``tokens`` (CAS
access tokens). The CAS listener's endpoints, which read the request context, sit above it in
:mod:`ckpt_localhub.api_cas`; the Hub's own Xet routes (the token routes, the headers on
``resolve``) are in :mod:`ckpt_localhub.api_xet`.
"""

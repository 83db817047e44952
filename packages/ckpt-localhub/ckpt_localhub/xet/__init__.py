"""The local Hub's Xet side: the CAS service ``hf_xet`` uploads to and downloads from.

Rooms: ``hashes`` (the protocol's keyed hashes and their string form), ``xorb`` and
``shard`` (the two object formats), ``store`` (where they live on disk), ``tokens`` (CAS
access tokens), ``cas_api`` (the CAS listener's endpoints). The Hub's own Xet routes (the
token routes, the headers on ``resolve``) are in :mod:`ckpt_localhub.api_xet`.
"""

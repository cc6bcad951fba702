"""The leaf of Juru: clock, ids, run statuses, money, key hashing and domain errors.

Pure: it imports nothing of juru, and everything may import it.
"""

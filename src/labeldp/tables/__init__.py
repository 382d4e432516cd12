"""Tables and folders on disk, beside the boundary and below it: a table's files opened and read in batches
out of core (:mod:`labeldp.tables.table_files`, :mod:`labeldp.tables.table_batches`), row keys
(:mod:`labeldp.tables.keys`), the release folder's format and its reading back
(:mod:`labeldp.tables.folder_format`), and a folder written once under its lock (:mod:`labeldp.tables.publishing`).

Nothing here reads a private label: a label column passes through as Arrow values, matched to the classes
and released by :mod:`labeldp.boundary`. Its public names are :mod:`labeldp.boundary`'s.
"""

"""Files: how every session file is written, read and locked (floor 0, no Stage O knowledge).

:mod:`.io_seam` (the one seam every write and read goes through, and the environment
faults it raises), :mod:`.atomic` (temp file, fsync, rename), :mod:`.strict_json`
(duplicate keys, NaN and non-regular files refused), :mod:`.flock` (the exclusive
lock file every ledger append and lease takes), :mod:`.link_loop` (a symbolic link
loop named as one), :mod:`.stale_temps` (what a killed writer left behind).

The face imports nothing: import the module you need.
"""

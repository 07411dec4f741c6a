"""What Go prints and accepts, in one place: JSON (json.py), durations and times (timefmt.py),
flag values (strconv.py) and RE2 regular expressions (regex.py)."""

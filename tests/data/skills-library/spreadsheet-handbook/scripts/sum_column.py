"""Total one column of a sheet: python scripts/sum_column.py FILE HEADER."""

import sys


def total(rows, header):
    column = rows[0].index(header)
    return sum(float(row[column]) for row in rows[1:] if row[column] not in (None, ""))


if __name__ == "__main__":
    print("usage: sum_column.py FILE HEADER", file=sys.stderr)

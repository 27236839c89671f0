"""One adapter per AWS service; each translates ``ClientError`` codes into :mod:`capacity.errors`."""

module goprint

go 1.21

module rendergate.example/client

go 1.19

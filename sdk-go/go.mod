module github.com/aerostream/aerostream/sdk-go

go 1.22

module github.com/sambaflow/samba/bindings/go

go 1.19

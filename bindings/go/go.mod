module samba

go 1.19

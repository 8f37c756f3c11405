module github.com/sluicemq/sluice/services/storage

go 1.26

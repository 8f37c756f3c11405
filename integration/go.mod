module github.com/sluicemq/sluice/integration

go 1.26

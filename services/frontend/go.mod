module github.com/sluicemq/sluice/services/frontend

go 1.26

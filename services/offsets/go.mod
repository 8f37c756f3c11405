module github.com/sluicemq/sluice/services/offsets

go 1.26

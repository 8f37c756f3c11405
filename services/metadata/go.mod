module github.com/sluicemq/sluice/services/metadata

go 1.26

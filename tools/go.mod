module github.com/sluicemq/sluice/tools

go 1.26

require github.com/sluicemq/sluice/libs v0.0.0

replace github.com/sluicemq/sluice/libs => ../libs

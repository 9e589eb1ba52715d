module github.com/drover-run/drover

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.uber.org/goleak v1.3.0
)

require golang.org/x/text v0.14.0 // indirect

module github.com/substatehq/substate

go 1.26.0

require github.com/theory/jsonpath v0.10.2

require github.com/stretchr/testify v1.11.1 // indirect

package httpapi

// CapConns exports capConns to the tests.
var CapConns = capConns

// Package service holds what every Sluice binary shares: flags with SLUICE_*
// environment fallbacks, one structured logger, and the admin HTTP listener
// serving /healthz, /readyz, /metrics and (behind a flag) /debug/pprof.
//
// A binary parses its Config with a FlagSet, validates it, and hands it to Run,
// which builds the fx application with the Module of this package and the
// service's own modules.
package service

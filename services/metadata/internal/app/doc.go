// Package app assembles the metadata service: it turns flags (with SLUICE_*
// environment fallbacks) into a validated Config and the Config into the fx
// options of the process. cmd/sluice-metadata hands Parse to service.Main;
// tests build the same graph with Options.
//
// Start order follows the dependency graph: raft node, controller, HTTP API;
// stop order is the reverse, so the API stops taking requests before the
// controller and Raft go away.
package app

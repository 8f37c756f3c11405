// Package client is Sluice's Go SDK. This first part holds the Admin client
// (topics and cluster metadata) and the PartitionReader, which reads one
// partition by offset straight from its leader over the storage protocol and
// follows leader changes. The group-member Consumer and the batching Producer
// build on these.
package client

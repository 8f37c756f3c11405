package fsm

import "go.uber.org/fx"

// Module provides the *FSM.
func Module() fx.Option {
	return fx.Module("fsm", fx.Provide(New))
}

package ratelimit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Kinds of errors, for errors.Is. Every error a command returns from the server is an *Error
// that also unwraps to go-redis's redis.Error.
var (
	// ErrModuleNotLoaded: the server does not know the module's commands.
	ErrModuleNotLoaded = errors.New("ratelimit: the redis-ratelimit module is not loaded")
	// ErrUnknownPolicy: RL.LIMIT, RL.ALL or RL.CHECKALL named a policy the server does not hold.
	ErrUnknownPolicy = errors.New("ratelimit: unknown policy")
	// ErrWrongType: the key holds another algorithm's limiter or a non-module value (WRONGTYPE).
	ErrWrongType = errors.New("ratelimit: WRONGTYPE")
	// ErrLimited is returned by Lease when the units do not fit; the error is a *LimitedError.
	ErrLimited = errors.New("ratelimit: rate limit exceeded")
)

// Error is an error reply of the server, classified: errors.Is(err, ErrModuleNotLoaded),
// ErrUnknownPolicy or ErrWrongType, and errors.As(err, &redisErr) with redis.Error.
type Error struct {
	kind error
	Err  error
}

func (e *Error) Error() string {
	if e.kind == ErrModuleNotLoaded {
		return fmt.Sprintf("%s (%s): load it with `loadmodule /path/to/libredis_ratelimit.so` "+
			"in redis.conf or `MODULE LOAD /path/to/libredis_ratelimit.so`", ErrModuleNotLoaded, e.Err)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is this error's kind.
func (e *Error) Is(target error) bool { return e.kind != nil && target == e.kind }

// classify wraps a server's error reply; other errors (network, context) are returned as they are.
func classify(err error) error {
	if err == nil || err == redis.Nil {
		return err
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return &Error{kind: ErrWrongType, Err: err}
	case strings.HasPrefix(msg, "ERR unknown policy"):
		return &Error{kind: ErrUnknownPolicy, Err: err}
	case strings.HasPrefix(msg, "ERR unknown command") &&
		(strings.Contains(strings.ToUpper(msg), "'RL.") || strings.Contains(strings.ToUpper(msg), "'CL.THROTTLE'")):
		return &Error{kind: ErrModuleNotLoaded, Err: err}
	}
	return &Error{Err: err}
}

// LimitedError carries the Result of a denied Lease; errors.Is(err, ErrLimited) is true.
type LimitedError struct{ Result *Result }

func (e *LimitedError) Error() string {
	if e.Result.Never {
		return "ratelimit: rate limit exceeded (never: the cost is above the limit)"
	}
	return fmt.Sprintf("ratelimit: rate limit exceeded (retry after %v)", e.Result.RetryAfter)
}

func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// Classify turns a server's error reply into an *Error (errors.Is with ErrWrongType,
// ErrUnknownPolicy, ErrModuleNotLoaded); other errors are returned as they are. For packages
// that run the module's commands themselves.
func Classify(err error) error { return classify(err) }

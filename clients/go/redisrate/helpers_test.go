package redis_rate

import "context"

var ctx = context.Background()

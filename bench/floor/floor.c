/* The module API's floor for a granted RL.GCRA call, for bench/instructions.sh.
 *
 * FLOOR.GCRA key burst rate period makes the module API calls a granted RL.GCRA call makes, in
 * the cheapest way the API allows, and nothing else: the arguments are not parsed, there is no
 * limiter arithmetic, no per-key rule, no value encoding. It opens the key, updates a 32-byte
 * value in place (created on the first call), sets an absolute expiry, closes the key, reads the
 * context flags for the protocol, replies five integers (a map under RESP3), propagates the new
 * value (`FLOOR.SET key <32 bytes>`, as RL.GCRA propagates `RL._SET`) and fires a keyspace
 * event. RL.GCRA's count minus this one's is the module's own work per call.
 *
 * FLOOR.ALL numkeys key [key ...] (1 to 3 keys) does the same for a granted RL.ALL call over n
 * GCRA keys: each key opened, updated in place and given its expiry once, one reply of five
 * integers, one propagated command carrying every new value (`FLOOR.SET key value [key value
 * ...]`) and one keyspace event per key. RL.ALL's count minus this one's is the module's own work
 * for n keys. Arguments after the keys (RL.ALL's limiters, given so that Redis reads the same
 * request) are not looked at.
 *
 * The options of a single-limiter call have floors of their own, so that an option's own work is
 * its row minus its floor (each takes the option's arguments, which Redis reads, and does what
 * FLOOR.GCRA does but for the one thing the option changes in the API calls):
 * - FLOOR.GCRA itself given the option's tokens (`SHADOW`, `DELAY 1s`): the same API calls as
 *   the plain call, the tokens only read by Redis;
 * - FLOOR.DETAIL replies the detailed reply's shape (SPEC "The detailed reply") for one limiter:
 *   under RESP2 an array of the five integers, a nil `denied_by`, the bulk `reason`, and one
 *   nested array holding the limiter's name and key (bulks), seven integers and a nil `policy`;
 *   under RESP3 the same as maps with their field names;
 * - FLOOR.DEDUP propagates the call as a call whose value is too long to replicate as itself is
 *   propagated (a key remembering `DEDUP` ids): its own arguments after the name, then `AT
 *   <ms>`, the form of `RL.GCRA ... DEDUP id AT t` (`HOLD ttl DEDUP id` alike).
 *
 * Built by bench/instructions.sh (cc -O2 -shared -fPIC) against the redismodule.h of the
 * redis-module crate; never loaded outside the benchmark. */
#include <string.h>
#include <time.h>

#include "redismodule.h"

typedef struct {
    long long last, tat, params[2];
} Value;

static RedisModuleType *ValueType;

static void *value_load(RedisModuleIO *io, int encver) {
    (void)encver;
    Value *v = RedisModule_Calloc(1, sizeof(Value));
    v->last = RedisModule_LoadSigned(io);
    v->tat = RedisModule_LoadSigned(io);
    return v;
}

static void value_save(RedisModuleIO *io, void *p) {
    Value *v = p;
    RedisModule_SaveSigned(io, v->last);
    RedisModule_SaveSigned(io, v->tat);
}

static void value_free(void *p) { RedisModule_Free(p); }

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Update the value of `name` as a granted GCRA call at `now` does; NULL on WRONGTYPE. */
static Value *floor_update(RedisModuleCtx *ctx, RedisModuleString *name, long long now) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    Value *v;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        v = RedisModule_Calloc(1, sizeof(Value));
        RedisModule_ModuleTypeSetValue(key, ValueType, v);
    } else if (RedisModule_ModuleTypeGetType(key) == ValueType) {
        v = RedisModule_ModuleTypeGetValue(key);
    } else {
        RedisModule_CloseKey(key);
        return NULL;
    }
    if (v->tat < now) v->tat = now;
    v->tat += 60000000;
    v->last = now;
    RedisModule_SetAbsExpire(key, v->tat / 1000 + 1);
    RedisModule_CloseKey(key);
    return v;
}

/* The reply of a granted call: five integers, a map of them under RESP3. */
static void reply_granted(RedisModuleCtx *ctx, const Value *v, long long now) {
    static const char *names[5] = {"granted", "limit", "remaining", "retry_after_ms",
                                   "reset_after_ms"};
    long long reply[5] = {1, 10000000, 9999999, 0, (v->tat - now) / 1000};
    int resp3 = RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
    if (resp3) {
        RedisModule_ReplyWithMap(ctx, 5);
    } else {
        RedisModule_ReplyWithArray(ctx, 5);
    }
    for (int i = 0; i < 5; i++) {
        if (resp3) RedisModule_ReplyWithStringBuffer(ctx, names[i], strlen(names[i]));
        RedisModule_ReplyWithLongLong(ctx, reply[i]);
    }
}

static int floor_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    long long now = now_us();
    Value *v = floor_update(ctx, argv[1], now);
    if (v == NULL) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    reply_granted(ctx, v, now);
    RedisModule_Replicate(ctx, "floor.set", "sb", argv[1], (const char *)v, sizeof(Value));
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.gcra", argv[1]);
    return REDISMODULE_OK;
}

static const char *entry_names[10] = {"name",           "key",      "cost",
                                      "granted",        "limit",    "remaining",
                                      "retry_after_ms", "reset_after_ms", "window_ms",
                                      "policy"};

static int floor_detail(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    static const char *names[8] = {"granted",        "limit",     "remaining", "retry_after_ms",
                                   "reset_after_ms", "denied_by", "reason",    "limiters"};
    if (argc < 5) return RedisModule_WrongArity(ctx);
    long long now = now_us();
    Value *v = floor_update(ctx, argv[1], now);
    if (v == NULL) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    long long reply[5] = {1, 10000000, 9999999, 0, (v->tat - now) / 1000};
    long long entry[7] = {1, 1, 10000000, 9999999, 0, (v->tat - now) / 1000, 600000000000LL};
    int resp3 = RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3;
    size_t keylen;
    const char *keyname = RedisModule_StringPtrLen(argv[1], &keylen);
#define FIELD(n) \
    if (resp3) RedisModule_ReplyWithStringBuffer(ctx, (n), strlen(n))
    if (resp3) {
        RedisModule_ReplyWithMap(ctx, 8);
    } else {
        RedisModule_ReplyWithArray(ctx, 8);
    }
    for (int i = 0; i < 5; i++) {
        FIELD(names[i]);
        RedisModule_ReplyWithLongLong(ctx, reply[i]);
    }
    FIELD(names[5]);
    RedisModule_ReplyWithNull(ctx);
    FIELD(names[6]);
    RedisModule_ReplyWithStringBuffer(ctx, "granted", 7);
    FIELD(names[7]);
    RedisModule_ReplyWithArray(ctx, 1);
    if (resp3) {
        RedisModule_ReplyWithMap(ctx, 9);
    } else {
        RedisModule_ReplyWithArray(ctx, 10);
    }
    FIELD(entry_names[0]);
    RedisModule_ReplyWithStringBuffer(ctx, keyname, keylen);
    FIELD(entry_names[1]);
    RedisModule_ReplyWithStringBuffer(ctx, keyname, keylen);
    for (int i = 0; i < 7; i++) {
        FIELD(entry_names[2 + i]);
        RedisModule_ReplyWithLongLong(ctx, entry[i]);
    }
    if (!resp3) RedisModule_ReplyWithNull(ctx);
#undef FIELD
    RedisModule_Replicate(ctx, "floor.set", "sb", argv[1], (const char *)v, sizeof(Value));
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.detail", argv[1]);
    return REDISMODULE_OK;
}

static int floor_dedup(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    long long now = now_us();
    Value *v = floor_update(ctx, argv[1], now);
    if (v == NULL) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    reply_granted(ctx, v, now);
    /* `AT <ms>.<µs>`, as the module writes the time a call was evaluated at. */
    char at[32];
    char *p = at + sizeof(at);
    long long us = now;
    for (int i = 0; i < 3; i++, us /= 10) *--p = (char)('0' + us % 10);
    *--p = '.';
    do {
        *--p = (char)('0' + us % 10);
        us /= 10;
    } while (us > 0);
    RedisModule_Replicate(ctx, "floor.dedup", "vcb", argv + 1, (size_t)(argc - 1), "AT", p,
                          (size_t)(at + sizeof(at) - p));
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.dedup", argv[1]);
    return REDISMODULE_OK;
}

static int floor_all(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    long long n;
    if (RedisModule_StringToLongLong(argv[1], &n) != REDISMODULE_OK || n < 1 || n > 3 ||
        argc < 2 + n)
        return RedisModule_ReplyWithError(ctx, "ERR numkeys must be 1 to 3, one key each");
    long long now = now_us();
    Value *v[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n; i++) {
        v[i] = floor_update(ctx, argv[2 + i], now);
        if (v[i] == NULL) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    reply_granted(ctx, v[0], now);
    const char *b[3] = {(const char *)v[0], (const char *)v[n > 1 ? 1 : 0],
                        (const char *)v[n > 2 ? 2 : 0]};
    size_t z = sizeof(Value);
    if (n == 1) {
        RedisModule_Replicate(ctx, "floor.set", "sb", argv[2], b[0], z);
    } else if (n == 2) {
        RedisModule_Replicate(ctx, "floor.set", "sbsb", argv[2], b[0], z, argv[3], b[1], z);
    } else {
        RedisModule_Replicate(ctx, "floor.set", "sbsbsb", argv[2], b[0], z, argv[3], b[1], z,
                              argv[4], b[2], z);
    }
    for (int i = 0; i < n; i++)
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "floor.all", argv[2 + i]);
    return REDISMODULE_OK;
}

static int floor_set(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3 || argc % 2 != 1) return RedisModule_WrongArity(ctx);
    for (int i = 1; i < argc; i += 2) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(argv[i + 1], &len);
        if (len != sizeof(Value)) return RedisModule_ReplyWithError(ctx, "ERR bad value");
        RedisModuleKey *key =
            RedisModule_OpenKey(ctx, argv[i], REDISMODULE_READ | REDISMODULE_WRITE);
        int type = RedisModule_KeyType(key);
        if (type != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) != ValueType) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        }
        Value *v = RedisModule_Alloc(sizeof(Value));
        memcpy(v, p, sizeof(Value));
        RedisModule_ModuleTypeSetValue(key, ValueType, v);
        RedisModule_SetAbsExpire(key, v->tat / 1000 + 1);
        RedisModule_CloseKey(key);
    }
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "rlfloor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods methods = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = value_load,
        .rdb_save = value_save,
        .free = value_free,
    };
    ValueType = RedisModule_CreateDataType(ctx, "rl-floor0", 0, &methods);
    if (ValueType == NULL) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.gcra", floor_gcra, "write deny-oom fast", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.all", floor_all, "write deny-oom fast", 2, -1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.detail", floor_detail, "write deny-oom fast", 1, 1,
                                  1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.dedup", floor_dedup, "write deny-oom fast", 1, 1,
                                  1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.set", floor_set, "write deny-oom", 1, -1, 2) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}

#!/bin/sh
# Writes fuzz_job's seed corpus in the input encoding described in fuzz_job.c.
# Usage: sh tests/fuzz/make_corpus.sh [dir]   (default: tests/fuzz/corpus, committed)
set -eu
DIR=${1:-$(dirname "$0")/corpus}
mkdir -p "$DIR"

# Flag bits (byte 0).
RESQUE=1 V8=2 V6=4 RUN_AT=8 NOOPT=16 MAX_U16=32 MAX_1M=64 NULLS=128
JID=0123456789abcdef01234567
NOW=1700000001500000
# Header after the flags: MAX CREATED RUN_AT NOW PREFIX HUGE SEP (HUGE: 16 KiB units).
H="0 1700000000123456 0 $NOW 1 0 255"
FUTURE="0 1700000000123456 1700003600250000 $NOW 3 0 255"
PAST="0 1700000000123456 1699999999000000 $NOW 255 0 255"

# le VALUE NBYTES: VALUE as NBYTES little-endian bytes (two's complement).
le()
{
	i=0
	while [ "$i" -lt "$2" ]; do
		# shellcheck disable=SC2059 # the format is the octal escape itself
		printf "\\$(printf %03o $((($1 >> (8 * i)) & 255)))"
		i=$((i + 1))
	done
}

# The format byte (fuzz_job.c): 0 sidekiq or resque by the RESQUE flag,
# 1 activejob, 2 celery, 3 laravel, 4 bullmq; +8 Rails 6.1; +16 no uuid.
FMT=0
# fseed FMT NAME ...: seed in that format.
fseed()
{
	FMT=$1
	shift
	seed "$@"
	FMT=0
}

# seed NAME FLAGS "HEADER" CLASS QUEUE JID OPTIONS ARGS: the five columns are
# printf formats (\NNN any byte, \000 a NUL, \\ a backslash, %% a percent).
seed()
{
	name=$1 flags=$2 hdr=$3
	shift 3
	# shellcheck disable=SC2086 # split the header into its numbers
	set -- $hdr "$@"
	{
		le "$flags" 1
		le "$1" 2
		le "$2" 8
		le "$3" 8
		le "$4" 8
		le "$5" 1
		if [ "$6" -gt 0 ]; then le 72 1; else le 0 1; fi # 'H' turns huge args on
		le "$6" 1
		le "$FMT" 1
		le "$7" 1
		for f in "$8" "$9" "${10}" "${11}"; do
			# shellcheck disable=SC2059
			printf "$f"
			le "$7" 1
		done
		# shellcheck disable=SC2059
		printf "${12}"
	} >"$DIR/$name"
}

# nest N: N opening brackets, a number, N closing ones.
nest()
{
	printf "%$1s" '' | tr ' ' '['
	printf 1
	printf "%$1s" '' | tr ' ' ']'
}

M=$MAX_1M
# Valid rows: both formats, Sidekiq's stamp styles, immediate and scheduled.
seed sidekiq7_basic $M "$H" HardWorker default $JID '{}' '[1, "two"]'
seed sidekiq8_no_options $((M | V8 | NOOPT)) "$H" HardWorker default $JID '' '[]'
seed sidekiq6_scheduled $((M | V6 | RUN_AT)) "$FUTURE" Mailer::Deliver mailers $JID '{}' '["a@b.c"]'
seed sidekiq8_run_at_past $((M | V8 | RUN_AT)) "$PAST" HardWorker low $JID '{}' '[{"id":7}]'
seed resque_basic $((M | RESQUE | NOOPT)) "$H" Archive file_serve '' '' '[42, "x"]'
seed resque_scheduled $((M | RESQUE | RUN_AT)) "$FUTURE" Archive file_serve not-a-jid '{"retry":1}' '[]'

# Options: merged, typed, reserved, duplicated, not an object.
seed options_retry_tags $M "$H" HardWorker default $JID \
	'{"retry": 5, "tags": ["billing", "urgent"], "backtrace": true}' '[1]'
seed options_unicode $((M | V8)) "$H" HardWorker default $JID \
	'{"retry": false, "t\303\244gs": ["\\u2028", "\342\202\254"]}' '[]'
seed options_reserved $M "$H" HardWorker default $JID '{"enqueued_at": 1}' '[]'
seed options_duplicate_key $M "$H" HardWorker default $JID '{"retry": 1, "retry": 2}' '[]'
seed options_not_object $M "$H" HardWorker default $JID '[1]' '[]'
seed options_big_int $M "$H" HardWorker default $JID '{"retry": 99999999999999999999}' '[]'
seed options_deep_100 $M "$H" HardWorker default $JID "{\"k\": $(nest 99)}" '[]'
seed options_deep_101 $M "$H" HardWorker default $JID "{\"k\": $(nest 100)}" '[]'

# Args: numbers kept verbatim, wrong types, garbage, bad bytes.
seed args_nested_objects $((M | V8)) "$H" HardWorker default $JID '{}' \
	'[{"user": {"id": 1, "tags": ["x"]}}, null, true, "\\u00e9\\ud83d\\ude00\\"\\\\"]'
seed args_numbers $M "$H" HardWorker default $JID '{}' \
	'[123456789012345678901234567890, 0.1, -0, 1e300, 1E-7, -9223372036854775808]'
seed args_real_overflow $M "$H" HardWorker default $JID '{}' '[1e400]'
seed args_object $M "$H" HardWorker default $JID '{}' '{"a": 1}'
seed args_whitespace $((M | RESQUE)) "$H" HardWorker default '' '{}' ' \n\t[1] \r\n'
seed args_trailing_garbage $M "$H" HardWorker default $JID '{}' '[1]]'
seed args_unterminated $M "$H" HardWorker default $JID '{}' '[1,\n"\303\244'
seed args_raw_nul $M "$H" HardWorker default $JID '{}' '["a\000b"]'
seed args_escaped_nul $M "$H" HardWorker default $JID '{}' '["\\u0000"]'
# As the app wrote them (a json column): key order, -0.0, \u0000 in options, duplicate keys.
seed args_as_written $((M | V8)) "$H" HardWorker default $JID '{"zz": "\\u0000", "aa": -0.0}' \
	'[{"zeta": 1, "alpha": -0.0, "nul": "a\\u0000b"}, 1E+2]'
seed args_duplicate_keys $M "$H" HardWorker default $JID '{}' '[{"a": 1, "a": 2}]'
seed args_invalid_utf8 $M "$H" HardWorker default $JID '{}' '["\300\257", "\377"]'
# Nesting: 99 levels fit a job, 100 do not.
seed args_deep_99 $M "$H" HardWorker default $JID '{}' "$(nest 99)"
seed args_deep_100 $((M | RESQUE)) "$H" HardWorker default '' '{}' "$(nest 100)"
# Huge: the args column repeated to 1.25 MiB against the 1 MiB limit, and to 64 KiB.
seed args_huge_over $M "0 1700000000123456 0 $NOW 1 80 255" HardWorker default $JID '{}' \
	'"0123456789abcdef"'
seed args_huge_ok 0 "0 1700000000123456 0 $NOW 0 4 255" HardWorker default $JID '{}' \
	'{"a":[1,2.5,"x"]}'

# Class, queue and jid: bad bytes, empty, wrong shape.
seed class_invalid_utf8 $M "$H" 'Hard\300\257Worker' default $JID '{}' '[]'
seed class_utf8 $M "$H" '\303\204rger\360\237\230\200' 'd\342\202\254' $JID '{}' '[]'
seed class_ff_byte $M "0 1700000000123456 0 $NOW 1 0 1" 'Hard\377Worker' default $JID '{}' '[]'
seed queue_surrogate $M "$H" HardWorker 'q\355\240\200' $JID '{}' '[]'
seed class_nul $((M | RESQUE)) "$H" 'Hard\000Worker' default '' '{}' '[]'
seed class_controls $M "$H" 'A\001\037"B\\\177' default $JID '{}' '[]'
seed class_empty $M "$H" '' default $JID '{}' '[]'
seed queue_null $((M | NULLS)) "$H" HardWorker '' $JID '{}' '[]'
seed jid_uppercase $M "$H" HardWorker default 0123456789ABCDEF01234567 '{}' '[]'

# Limits and clock extremes.
seed max_bytes_small $((MAX_U16 | V8)) "120 1700000000123456 0 $NOW 1 0 255" HardWorker default $JID '{}' \
	'["0123456789", "0123456789", "0123456789", "0123456789"]'
seed clock_extremes $((MAX_U16 | MAX_1M | RUN_AT)) \
	"0 $((-9223372036854775807 - 1)) 9223372036854775807 -1 1 0 255" HardWorker default $JID '{}' '[]'
seed clock_extremes_v8 $((V8 | NOOPT)) \
	"0 9223372036854775807 0 $((-9223372036854775807 - 1)) 0 0 255" HardWorker default $JID '' '[]'

# The other formats: ActiveJob (also per row in a Sidekiq relay), Celery, Laravel.
AJ=1 CELERY=2 LARAVEL=3 BULLMQ=4 RAILS61=8 NOUUID=16
fseed $AJ activejob_basic $M "$H" SendInvoiceJob default $JID '{"priority": 5, "retry": 3}' \
	'[1, {"a": {"b": []}}, {"_aj_globalid": "gid://shop/Order/7"}, "x"]'
fseed $((AJ | RAILS61)) activejob_61_scheduled $((M | RUN_AT)) "$FUTURE" SendInvoiceJob mailers $JID '{}' '[{}]'
fseed $((AJ | NOUUID)) activejob_no_uuid $M "$H" SendInvoiceJob default $JID '{}' '[]'
fseed $AJ activejob_reserved_key $M "$H" SendInvoiceJob default $JID '{}' '[{"_aj_symbol_keys": []}]'
seed activejob_per_row $((M | V8)) "$H" SendInvoiceJob default $JID '{"activejob": true, "locale": "de"}' '[2]'
seed activejob_per_row_bad $M "$H" SendInvoiceJob default $JID '{"activejob": "yes"}' '[]'
fseed $CELERY celery_basic $M "$H" shop.tasks.add celery $JID '{"kwargs": {"x": 1, "y": [0.1]}}' \
	'[1, "two\u00e9", null, true, 1e300]'
fseed $CELERY celery_eta $((M | RUN_AT)) "$FUTURE" shop.tasks.add celery $JID '{"priority": 6}' '[]'
fseed $CELERY celery_kwargs_not_object $M "$H" shop.tasks.add celery $JID '{"kwargs": [1]}' '[]'
fseed $((CELERY | NOUUID)) celery_no_uuid $M "$H" shop.tasks.add celery $JID '' '[]'
AJDATA='{"job_class": "SendInvoiceJob", "job_id": "0b8e4f1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b", "arguments": [{"_aj_symbol_keys": ["a"], "a": 1}], "locale": "en"}'
fseed $AJ activejob_serialized $M "$H" SendInvoiceJob default $JID '{"activejob": true, "serialized": true, "retry": 2}' \
	"[$AJDATA]"
fseed $AJ args_duplicate_key_serialized $M "$H" SendInvoiceJob default $JID '{"activejob": true, "serialized": true}' \
	'[{"job_class": "SendInvoiceJob", "job_id": "a", "job_id": "b", "arguments": []}]'
fseed $CELERY celery_serialized $((M | RUN_AT)) "$FUTURE" shop.tasks.add celery $JID \
	'{"serialized": true, "priority": 3, "reply_to": "r1", "headers": {"lang": "py", "task": "shop.tasks.add", "id": "0b8e4f1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b", "eta": "2023-11-15T00:00:00+00:00"}}' \
	'[[1, 2], {"k": 1e300}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]'
fseed $LARAVEL laravel_basic $M "$H" 'App\\Jobs\\SendReceipt@handle' default $JID '{}' \
	'["a/b", "\303\244", {"n": 1.0}]'
fseed $LARAVEL laravel_delayed $((M | RUN_AT)) "$FUTURE" 'App\\Jobs\\Ping' low $JID '{"maxTries": 3}' '[]'
fseed $LARAVEL laravel_unknown_option $M "$H" 'App\\Jobs\\Ping@handle' low $JID '{"tries": 3}' '[]'
fseed $BULLMQ bullmq_basic $M "$H" welcome emails $JID '{"attempts": 3, "backoff": {"type": "fixed", "delay": 10}}' \
	'[{"z": 1, "a": "x\\u0000y", "n": -0.0}]'
fseed $BULLMQ bullmq_options $((M | RUN_AT)) "$FUTURE" later emails $JID \
	'{"jobId": "order-\\u00e9", "priority": 7, "lifo": true, "timestamp": 1.7e12}' '[[1, 2]]'
fseed $BULLMQ bullmq_run_at $((M | RUN_AT)) "$FUTURE" later emails $JID '{"attempts": 1}' '[]'
fseed $BULLMQ bullmq_integer_id $M "$H" n emails $JID '{"jobId": "12345678901234567000"}' '[1]'
fseed $BULLMQ bullmq_bad $M "$H" n 'a:b' $JID '{"repeat": {"every": 1}}' '[1, 2]'
# A payload clients/php staged (Laravel's createPayload): a protected property's \u0000, "\/".
LVPAYLOAD='{\\"uuid\\":\\"0b8e4f1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b\\",\\"displayName\\":\\"App\\\\\\\\Jobs\\\\\\\\Send\\",\\"job\\":\\"Illuminate\\\\\\\\Queue\\\\\\\\CallQueuedHandler@call\\",\\"backoff\\":\\"1,2\\",\\"data\\":{\\"commandName\\":\\"App\\\\\\\\Jobs\\\\\\\\Send\\",\\"command\\":\\"O:13:\\\\\\"App\\\\\\\\Jobs\\\\\\\\Send\\\\\\":1:{s:6:\\\\\\"\\\\u0000*\\\\u0000a\\\\\\";s:3:\\\\\\"a\\\\/b\\\\\\";}\\"},\\"id\\":\\"k3\\",\\"attempts\\":0}'
fseed $LARAVEL laravel_serialized $((M | RUN_AT)) "$FUTURE" 'App\\Jobs\\Send' default $JID '{"serialized": true}' \
	"[\"$LVPAYLOAD\"]"
fseed $LARAVEL laravel_serialized_inf $M "$H" 'App\\Jobs\\Send' default $JID '{"serialized": true}' \
	'["{\\"uuid\\":\\"0b8e4f1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b\\",\\"displayName\\":\\"App\\\\\\\\Jobs\\\\\\\\Send\\",\\"job\\":\\"A@b\\",\\"data\\":[1e400],\\"id\\":\\"k\\",\\"attempts\\":0}"]'

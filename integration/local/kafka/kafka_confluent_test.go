package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
)

// TestKafkaConfluentPython drives the cluster with Debian's
// python3-confluent-kafka (librdkafka underneath), as its users write it:
// the AdminClient creates two topics without a replication factor (they
// get the cluster's durable default: 3 replicas, min.insync.replicas 2, as
// DescribeConfigs reports), grows one, describes and alters its configs,
// lists the consumer groups and deletes both topics at the end (Debian's
// 1.7.0 has no AdminClient calls for ACLs, quotas or SCRAM users); an idempotent producer with acks=all writes 2,000 keyed
// records; a group consumer reads them in per-key order and commits; and a
// transactional producer (librdkafka's transactions, version 1: it adds
// partitions and offsets to the transaction itself) aborts one transaction,
// then copies every record in transactions that also commit the consumer
// group's offsets with send_offsets_to_transaction. A read_committed reader
// sees exactly the copies, a read_uncommitted one the aborted records too,
// and the transactional group's committed offsets cover every record.
func TestKafkaConfluentPython(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	python := itest.NeedPython(t, "confluent_kafka", "python3-confluent-kafka")
	c := itest.StartCluster(t, 3)
	out := run(t, 4*time.Minute, "", python, "-c", confluentScript, c.KafkaAddrs()[0], "ck", "2000")
	if !strings.Contains(out, "ok: 2000 records produced, consumed in order, copied in transactions exactly once\n") {
		t.Fatalf("confluent-kafka-python:\n%s", out)
	}
	// The topics the script deleted are gone from the cluster.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ck", "ck-out"} {
		if _, ok := snap.Topic(name); ok {
			t.Fatalf("topic %s is still there after the AdminClient deleted it", name)
		}
	}
}

// confluentScript is the client program of TestKafkaConfluentPython:
// python3 -c SCRIPT BOOTSTRAP TOPIC RECORDS. It prints "ok: ..." when every
// check passed and exits 1 with the reason otherwise.
const confluentScript = `
import sys, time
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, NewPartitions, ConfigResource

boot, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = topic + '-out'

def fail(*what):
    print('FAIL:', *what)
    sys.exit(1)

def done(futures):
    for f in futures.values():
        f.result(timeout=60)

admin = AdminClient({'bootstrap.servers': boot})

# Admin: create without a replication factor, grow, describe.
done(admin.create_topics([NewTopic(topic, 2, config={'retention.ms': '3600000'}), NewTopic(out, 1)], operation_timeout=30))
done(admin.create_partitions([NewPartitions(topic, 3)], operation_timeout=30))
deadline = time.time() + 60
while True:
    md = admin.list_topics(timeout=10).topics.get(topic)
    if md is not None and md.error is None and len(md.partitions) == 3 and all(len(p.replicas) == 3 for p in md.partitions.values()):
        break
    if time.time() > deadline:
        fail('the topic never showed 3 partitions of 3 replicas:', md and {q: p.replicas for q, p in md.partitions.items()})
    time.sleep(0.2)
configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
entries = list(configs.values())[0].result(timeout=30)
if entries['retention.ms'].value != '3600000':
    fail('retention.ms', entries['retention.ms'].value)
if entries['min.insync.replicas'].value != '2':
    fail('min.insync.replicas of a topic created without a replication factor:', entries['min.insync.replicas'].value)
# AlterConfigs replaces the topic's whole set: retention.ms changes, and
# min.insync.replicas, left out, goes back to the cluster's value.
done(admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={'retention.ms': '7200000'})]))
entries = list(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values())[0].result(timeout=30)
if entries['retention.ms'].value != '7200000':
    fail('retention.ms after alter_configs', entries['retention.ms'].value)

# An idempotent producer with acks=all.
errors = []
def report(err, msg):
    if err is not None:
        errors.append(err)
p = Producer({'bootstrap.servers': boot, 'enable.idempotence': True, 'acks': 'all', 'linger.ms': 5})
for i in range(n):
    p.produce(topic, key=b'k%d' % (i % 7), value=b'%d' % i, on_delivery=report)
    p.poll(0)
if p.flush(60) != 0 or errors:
    fail('produce:', errors[:3])

def read(c, want, check):
    got, deadline = 0, time.time() + 90
    while got < want and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            fail('consume:', m.error())
        check(m)
        got += 1
    return got

last = {}
def in_order(m):
    v = int(m.value())
    if m.key() in last and v <= last[m.key()]:
        fail('order broken for', m.key(), v, 'after', last[m.key()])
    last[m.key()] = v

# A group consumer: reads everything in per-key order and commits.
c = Consumer({'bootstrap.servers': boot, 'group.id': topic + '-readers', 'auto.offset.reset': 'earliest', 'enable.auto.commit': False})
c.subscribe([topic])
if read(c, n, in_order) != n:
    fail('the group consumer read fewer than', n)
c.commit(asynchronous=False)
committed = c.committed([TopicPartition(topic, q) for q in range(3)], timeout=30)
if sum(tp.offset for tp in committed) != n:
    fail('committed offsets', [(tp.partition, tp.offset) for tp in committed])
c.close()
groups = {g.id for g in admin.list_groups(timeout=30)}
if topic + '-readers' not in groups:
    fail('list_groups does not list the group that committed:', groups)

# Transactions: one aborted, then consume-transform-produce with the
# group's offsets in each transaction.
tp = Producer({'bootstrap.servers': boot, 'transactional.id': topic + '-copier'})
tp.init_transactions(30)
tp.begin_transaction()
for i in range(10):
    tp.produce(out, value=b'aborted-%d' % i)
if tp.flush(30) != 0:  # written, not only queued: an abort drops what is still queued
    fail('the transaction to abort was not written')
tp.abort_transaction(30)

g = Consumer({'bootstrap.servers': boot, 'group.id': topic + '-copier', 'auto.offset.reset': 'earliest',
              'enable.auto.commit': False, 'isolation.level': 'read_committed'})
g.subscribe([topic])
copied = 0
while copied < n:
    tp.begin_transaction()
    batch = read(g, min(500, n - copied), lambda m: tp.produce(out, key=m.key(), value=b'copy-' + m.value()))
    if batch == 0:
        fail('the copier read nothing after', copied)
    tp.send_offsets_to_transaction(g.position(g.assignment()), g.consumer_group_metadata(), 30)
    tp.commit_transaction(30)
    copied += batch
committed = g.committed([TopicPartition(topic, q) for q in range(3)], timeout=30)
if sum(tp.offset for tp in committed) != n:
    fail('offsets committed in transactions', [(tp.partition, tp.offset) for tp in committed])
g.close()

def read_all(isolation):
    r = Consumer({'bootstrap.servers': boot, 'group.id': topic + '-' + isolation, 'auto.offset.reset': 'earliest',
                  'enable.auto.commit': False, 'isolation.level': isolation})
    r.assign([TopicPartition(out, 0, 0)])
    values, quiet = [], time.time() + 5
    while time.time() < quiet:
        m = r.poll(0.5)
        if m is None or m.error():
            continue
        values.append(m.value())
        quiet = time.time() + 3
    r.close()
    return values

seen = read_all('read_committed')
if len(seen) != n or len(set(seen)) != n or any(not v.startswith(b'copy-') for v in seen):
    fail('read_committed saw', len(seen), 'records,', len(set(seen)), 'distinct; first', seen[:3])
everything = read_all('read_uncommitted')
if len(everything) != n + 10 or sum(v.startswith(b'aborted-') for v in everything) != 10:
    fail('read_uncommitted saw', len(everything), 'records')

done(admin.delete_topics([topic, out], operation_timeout=30))
print('ok: %d records produced, consumed in order, copied in transactions exactly once' % n)
`

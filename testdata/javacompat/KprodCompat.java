// KprodCompat asks the real Java client (the kafka-clients jar that
// scripts/kafka-cluster.sh fetched) what it would do, so that kprod's tests
// compare against the Java client itself rather than against numbers typed
// in by hand. compat_integration_test.go compiles it with javac into a
// temporary directory and runs it once per test with many questions on
// stdin, one per line; it prints one answer per line.
//
// It is declared in the package of BuiltInPartitioner because the methods
// the adaptive partitioner is made of (randomPartition, the sticky
// partition info) are package-private: the test subclasses the real class
// and feeds it the random numbers kprod draws.
//
// Modes (the first argument):
//
//   partition  "N HEXKEY" -> BuiltInPartitioner.partitionForKey(key, N)
//              (HEXKEY may be empty for an empty key)
//   sizebound  "KEYLEN VALUELEN [HKEYLEN:HVALLEN ...]" (-1 = null) ->
//              AbstractRecords.estimateSizeInBytesUpperBound for the
//              current magic, what KafkaProducer checks against
//              max.request.size
//   adaptive   "DRAW;LEADERS;IDS;SIZES" -> the partition
//              BuiltInPartitioner.nextPartition picks when its random
//              number is DRAW: LEADERS is each partition's leader id (-1:
//              none), IDS and SIZES the eligible partitions and their
//              queue sizes as RecordAccumulator.partitionReady collects
//              them, or IDS "off" for adaptive partitioning disabled.
//   serialize  "TYPE VALUE" -> the hex bytes Java's TYPE serializer
//              writes for VALUE (Short, Integer, Long, Float, Double as
//              decimal; String as hex of its UTF-8 bytes)
package org.apache.kafka.clients.producer.internals;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.internal.AbstractRecords;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.serialization.DoubleSerializer;
import org.apache.kafka.common.serialization.FloatSerializer;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.ShortSerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.LogContext;

public class KprodCompat {
    private static final String TOPIC = "t";

    /** The real partitioner, with the random number supplied by the test. */
    private static final class FixedDraw extends BuiltInPartitioner {
        private final int draw;

        FixedDraw(int draw) {
            super(new LogContext(), TOPIC, 16384, false, "");
            this.draw = draw;
        }

        @Override
        int randomPartition() {
            return draw;
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String mode = args[0];
        for (String line; (line = in.readLine()) != null; ) {
            switch (mode) {
                case "partition": out.println(partition(line)); break;
                case "sizebound": out.println(sizeBound(line)); break;
                case "adaptive": out.println(adaptive(line)); break;
                case "serialize": out.println(serialize(line)); break;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
        out.flush();
    }

    private static int partition(String line) {
        String[] f = line.split(" ", -1);
        int n = Integer.parseInt(f[0]);
        byte[] key = HexFormat.of().parseHex(f.length > 1 ? f[1] : "");
        return BuiltInPartitioner.partitionForKey(key, n);
    }

    private static byte[] bytes(int len) {
        return len < 0 ? null : new byte[len];
    }

    private static int sizeBound(String line) {
        String[] f = line.trim().split(" +");
        List<Header> headers = new ArrayList<>();
        for (int i = 2; i < f.length; i++) {
            String[] kv = f[i].split(":");
            headers.add(new RecordHeader("k".repeat(Integer.parseInt(kv[0])), bytes(Integer.parseInt(kv[1]))));
        }
        return AbstractRecords.estimateSizeInBytesUpperBound(RecordBatch.CURRENT_MAGIC_VALUE, CompressionType.NONE,
            bytes(Integer.parseInt(f[0])), bytes(Integer.parseInt(f[1])), headers.toArray(new Header[0]));
    }

    private static int[] ints(String s) {
        if (s.isEmpty())
            return new int[0];
        String[] f = s.split(",");
        int[] out = new int[f.length];
        for (int i = 0; i < f.length; i++)
            out[i] = Integer.parseInt(f[i]);
        return out;
    }

    private static int adaptive(String line) {
        String[] f = line.split(";", -1);
        int draw = Integer.parseInt(f[0]);
        int[] leaders = ints(f[1]);
        List<Node> nodes = new ArrayList<>();
        List<PartitionInfo> parts = new ArrayList<>();
        for (int p = 0; p < leaders.length; p++) {
            Node leader = leaders[p] < 0 ? null : new Node(leaders[p], "localhost", 9092 + leaders[p]);
            if (leader != null && !nodes.contains(leader))
                nodes.add(leader);
            parts.add(new PartitionInfo(TOPIC, p, leader, new Node[0], new Node[0]));
        }
        Cluster cluster = new Cluster("c", nodes, parts, Collections.emptySet(), Collections.emptySet());
        FixedDraw bip = new FixedDraw(draw);
        if (f[2].equals("off")) {
            bip.updatePartitionLoadStats(null, null, null, 0);
        } else {
            // As RecordAccumulator.partitionReady: arrays as long as the
            // topic has queues, the eligible partitions first, length
            // telling how many are eligible.
            int[] ids = ints(f[2]);
            int[] sizes = ints(f[3]);
            int[] queueSizes = new int[leaders.length];
            int[] partitionIds = new int[leaders.length];
            System.arraycopy(sizes, 0, queueSizes, 0, sizes.length);
            System.arraycopy(ids, 0, partitionIds, 0, ids.length);
            bip.updatePartitionLoadStats(queueSizes, partitionIds, new String[leaders.length], ids.length);
        }
        return bip.peekCurrentPartitionInfo(cluster).partition();
    }

    private static String serialize(String line) {
        String[] f = line.split(" ", 2);
        String v = f[1];
        byte[] b;
        switch (f[0]) {
            case "Short": b = new ShortSerializer().serialize(TOPIC, Short.parseShort(v)); break;
            case "Integer": b = new IntegerSerializer().serialize(TOPIC, Integer.parseInt(v)); break;
            case "Long": b = new LongSerializer().serialize(TOPIC, Long.parseLong(v)); break;
            case "Float": b = new FloatSerializer().serialize(TOPIC, Float.parseFloat(v)); break;
            case "Double": b = new DoubleSerializer().serialize(TOPIC, Double.parseDouble(v)); break;
            case "String":
                b = new StringSerializer().serialize(TOPIC, new String(HexFormat.of().parseHex(v), StandardCharsets.UTF_8));
                break;
            default: throw new IllegalArgumentException("unknown type " + f[0]);
        }
        return HexFormat.of().formatHex(b);
    }
}

// The lab's Flink job (tests/e2e/test_flink_lab.py): numbers, slowed down, written by Flink's KafkaSink with
// exactly-once delivery, in a local mini-cluster.  Compiled with javac at test time against the jars
// txnwatch.lab.jars.resolve_flink_jars resolves; never packaged, never committed as a jar.
//
// Arguments: bootstrap servers, topic, transactional id prefix, naming strategy (INCREMENTING or POOLING),
// checkpoint interval in ms, parallelism, transaction.timeout.ms.

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public final class FlinkSinkJob {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String prefix = args[2];
        TransactionNamingStrategy naming = TransactionNamingStrategy.valueOf(args[3]);
        long checkpointMs = Long.parseLong(args[4]);
        int parallelism = Integer.parseInt(args[5]);
        String timeoutMs = args[6];

        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, new Configuration());
        env.enableCheckpointing(checkpointMs);
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(topic)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(prefix)
                .setTransactionNamingStrategy(naming)
                .setProperty("transaction.timeout.ms", timeoutMs)
                .build();
        env.fromSequence(0, Long.MAX_VALUE).map(new Slow()).sinkTo(sink);
        System.out.println("txnwatch-lab-flink: submitting " + prefix + " with " + naming);
        env.execute("txnwatch-lab-flink-" + prefix);
    }

    /** Twenty records a second per subtask: every checkpoint's transaction has something to commit. */
    public static final class Slow implements MapFunction<Long, String> {
        @Override
        public String map(Long value) throws Exception {
            Thread.sleep(50);
            return "r-" + value;
        }
    }
}

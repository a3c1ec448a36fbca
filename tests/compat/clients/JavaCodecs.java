// RocketMQ 5.x's body codecs, as its Lz4Compressor and ZstdCompressor use them (lz4-java's LZ4Frame
// streams with their defaults; zstd-jni's streams at the producer's compressLevel, 5), on stdin to stdout.
// usage: java -cp lz4-java.jar:zstd-jni.jar JavaCodecs.java compress|decompress lz4|zstd < in > out
import com.github.luben.zstd.ZstdInputStream;
import com.github.luben.zstd.ZstdOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import net.jpountz.lz4.LZ4FrameInputStream;
import net.jpountz.lz4.LZ4FrameOutputStream;

public class JavaCodecs {
    public static void main(String[] args) throws IOException {
        byte[] in = System.in.readAllBytes();
        byte[] out = args[0].equals("compress") ? compress(args[1], in) : decompress(args[1], in);
        System.out.write(out);
        System.out.flush();
    }

    static byte[] compress(String type, byte[] src) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(src.length);
        OutputStream out = type.equals("lz4") ? new LZ4FrameOutputStream(bytes) : new ZstdOutputStream(bytes, 5);
        out.write(src);
        out.flush();
        out.close();
        return bytes.toByteArray();
    }

    static byte[] decompress(String type, byte[] src) throws IOException {
        InputStream in = new ByteArrayInputStream(src);
        return (type.equals("lz4") ? new LZ4FrameInputStream(in) : new ZstdInputStream(in)).readAllBytes();
    }
}

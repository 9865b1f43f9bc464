// An Iceberg REST catalog on 127.0.0.1, for aiostreams' local development and tests.
//
//   java -cp '<jars>/*' RestCatalogServer.java <warehouse dir> <catalog.db path> <port, 0: free>
//
// Run as a single-file source program (java compiles it in memory at start: no build step).
// The catalog behind the REST API is Iceberg's JdbcCatalog on a SQLite file, with Hadoop's
// local FileIO; the REST layer is Iceberg's own reference adapter (RESTCatalogAdapter and
// RESTCatalogServlet from iceberg-core's test jar, the classes its REST fixture serves).
// Unlike that fixture, it binds 127.0.0.1 only and can take a free port. Prints one line,
// "listening http://127.0.0.1:PORT/", once it accepts connections; exits when its standard
// input closes (the process that started it went away) or on SIGTERM.

import java.io.File;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class RestCatalogServer {
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: RestCatalogServer.java <warehouse dir> <catalog.db> <port>");
      System.exit(2);
    }
    File warehouse = new File(args[0]).getAbsoluteFile();
    File database = new File(args[1]).getAbsoluteFile();
    int port = Integer.parseInt(args[2]);
    Map<String, String> properties = new HashMap<>();
    properties.put(CatalogProperties.CATALOG_IMPL, "org.apache.iceberg.jdbc.JdbcCatalog");
    properties.put(CatalogProperties.URI, "jdbc:sqlite:" + database.getPath());
    properties.put("jdbc.schema-version", "V1");
    properties.put(CatalogProperties.WAREHOUSE_LOCATION, warehouse.toURI().toString());
    Catalog catalog = CatalogUtil.buildIcebergCatalog("local", properties, new Configuration());

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))),
        "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println("listening http://127.0.0.1:" + connector.getLocalPort() + "/");
    System.out.flush();

    Thread watcher = new Thread(() -> {
      try {
        while (System.in.read() != -1) {
          // input is ignored; its end means the parent is gone
        }
      } catch (java.io.IOException e) {
        // a broken pipe is an end too
      }
      System.exit(0);
    }, "stdin-watcher");
    watcher.setDaemon(true);
    watcher.start();
    server.join();
  }
}
